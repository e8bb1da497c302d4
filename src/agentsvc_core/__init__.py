"""agentsvc core: entities, ports and use cases, free of any framework or driver."""
