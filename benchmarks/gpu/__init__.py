"""One command each for a GPU machine without network: the check, the training levers, and their staging."""
