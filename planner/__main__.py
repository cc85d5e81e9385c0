from planner._cli.main import main

raise SystemExit(main())
