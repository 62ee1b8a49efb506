"""The broker: the store served over the 4.x remoting protocol."""
