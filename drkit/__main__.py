from drkit.cli import main

raise SystemExit(main())
