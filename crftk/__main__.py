from crftk.cli import main

main()
