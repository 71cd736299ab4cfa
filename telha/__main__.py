from telha.cli import main

main()
