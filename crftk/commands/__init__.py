"""One library function per subcommand, which the CLI (crftk.cli) and the Python API call:
train (train, fit), tag (tag_files, Tagger), induce (induce)."""
