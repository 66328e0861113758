"""The top floor: the dashboard, the root URLs, the demo and the commands that span apps."""
