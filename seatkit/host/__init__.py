"""Host settings for peer-to-peer decode: what is desired, configured on disk, and live."""
