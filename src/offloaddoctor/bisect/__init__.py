"""Find the change that broke a run: across git commits (config or run mode) or between two configs."""
