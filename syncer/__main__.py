from syncer.app.cli import main

raise SystemExit(main())
