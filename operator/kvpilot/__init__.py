"""kvpilot: size, render, reconcile and autoscale vLLM fleets on Kubernetes."""

__version__ = "0.1.0"
