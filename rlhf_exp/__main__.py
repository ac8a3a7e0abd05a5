from rlhf_exp.app import main

main()
