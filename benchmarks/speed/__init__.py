"""How fast: training and decoding throughput, serving, start-up, memory and what features cost."""
