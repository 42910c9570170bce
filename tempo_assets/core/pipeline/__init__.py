"""The window workflow the assets call, one or two calls per asset."""
