"""Test double of Interbotix's interbotix_common_modules (see tests/interbotix_double/README.md)."""
