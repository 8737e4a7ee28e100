"""How good: BLEU against time, evidence and alignment, markup, steering, language detection."""
