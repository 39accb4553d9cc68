from gpuplan.cli import main

main()
