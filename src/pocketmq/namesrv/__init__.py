"""The NameServer: broker registry and topic routes."""
