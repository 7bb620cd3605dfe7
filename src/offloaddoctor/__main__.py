from offloaddoctor.cli import main

main()
