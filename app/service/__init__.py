"""The use cases, callable without HTTP: the routes decode, authorize, call one of these and encode."""
