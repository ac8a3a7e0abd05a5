from rlhf_exp.report.html import main

main()
