"""Tools for running groupfit on one machine without Docker (`make run`, `make demo`, tests): embedded
servers and the demo. Installed with the `local` extra; the service itself never imports this package
unless it has to start its own Redis."""
