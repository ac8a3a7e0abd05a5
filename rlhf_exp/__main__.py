from rlhf_exp.cli.main import main

main()
