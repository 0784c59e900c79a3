"""What shapes a run besides its inputs: the settings model, and the parsers of the values that
flags, job files and data contracts share."""
