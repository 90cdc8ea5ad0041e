"""Opening rumi files, reading their frames and validating them."""
