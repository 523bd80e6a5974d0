"""`seat campaign`: an unattended, reboot-spanning ablation of host settings, seat variants and live knobs."""
