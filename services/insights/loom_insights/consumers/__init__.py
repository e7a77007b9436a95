"""The insights plane reads nothing from the bus."""
