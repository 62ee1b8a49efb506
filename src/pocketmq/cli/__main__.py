from pocketmq.cli.main import main

main()
