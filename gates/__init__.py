"""Gate definitions: a scenario, one injected fault, the expected refusal and its control run."""
