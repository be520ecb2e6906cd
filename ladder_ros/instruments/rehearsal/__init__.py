"""The dress rehearsal's policy server: answers the openpi protocol as the configured policy would, with the
scripted expert's chunks after a modelled inference time, and its node."""
