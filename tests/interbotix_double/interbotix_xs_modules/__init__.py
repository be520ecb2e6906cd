"""Test double of Interbotix's interbotix_xs_modules (see tests/interbotix_double/README.md)."""
