from planner._cli import main

raise SystemExit(main())
