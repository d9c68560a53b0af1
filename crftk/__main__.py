from crftk.cli import main

main(prog_name="crftk")
