"""Shipped data: class lists."""
