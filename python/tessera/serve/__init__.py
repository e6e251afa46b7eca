"""Tessera Serve: Ray Serve's API (`ray.serve` renamed `tessera.serve`) for serving models and
business logic over HTTP and deployment handles.

    from tessera import serve

    @serve.deployment(num_replicas=2)
    class Echo:
        async def __call__(self, request):
            return await request.json()

    app = Echo.bind()

This part defines deployments, applications, batching, model multiplexing, the configs and
config-file schema, the replica contexts and the replica actor (replica.py); the controller
glue (serve.run, handles, status) comes with the runtime's serve controller.
"""

from tessera.serve.batching import batch
from tessera.serve.config import (AutoscalingConfig, AutoscalingPolicy, DeploymentMode,
                                  HTTPOptions, ProxyLocation, RequestRouterConfig, gRPCOptions)
from tessera.serve.context import ReplicaContext, get_replica_context
from tessera.serve.deployment import Application, Deployment, deployment
from tessera.serve.exceptions import (BackPressureError, DeploymentUnavailableError,
                                      RayServeException, RequestCancelledError)
from tessera.serve.ingress import ingress
from tessera.serve.multiplex import get_multiplexed_model_id, multiplexed
from tessera.serve.schema import LoggingConfig

__all__ = [
    "Application", "AutoscalingConfig", "AutoscalingPolicy", "BackPressureError", "Deployment",
    "DeploymentMode", "DeploymentUnavailableError", "HTTPOptions", "LoggingConfig",
    "ProxyLocation", "RayServeException", "ReplicaContext", "RequestCancelledError",
    "RequestRouterConfig", "batch", "deployment", "gRPCOptions", "get_multiplexed_model_id",
    "get_replica_context", "ingress", "multiplexed",
]
