"""One library function per subcommand, which the CLI (crftk.cli) and the Python API call:
train (train, fit), tag (run, tag_files), induce (induce), bag (bag, fit_bag), compose (compose).
What each kind of model file does at tag time is in crftk.kinds."""
