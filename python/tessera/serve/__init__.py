"""Tessera Serve: Ray Serve's API (`ray.serve` renamed `tessera.serve`) for serving models and
business logic over HTTP and deployment handles.

    from tessera import serve

    @serve.deployment(num_replicas=2)
    class Echo:
        async def __call__(self, request):
            return await request.json()

    app = Echo.bind()

    handle = serve.run(app)                     # deploys it, waits until it is RUNNING
    handle.remote({"x": 1}).result()

Deployments, applications, batching, model multiplexing, the configs and config-file schema,
the replica contexts and the replica actor (replica.py), the actor that holds a node's C++ HTTP
proxy (proxy.py); the module functions (serve.run, start, status, delete, shutdown,
get_app_handle, get_deployment_handle: api.py) over the serve controller the head hosts, and
the handles (handle.py) with their routers in each process.
The CLI is `tessera serve ...` (scripts.py). Nothing here needs tessera's extension until a
function talks to the cluster.
"""

from tessera.serve.api import (delete, get_app_handle, get_deployment_handle, run, shutdown,
                               start, status)
from tessera.serve.batching import batch
from tessera.serve.config import (AutoscalingConfig, AutoscalingPolicy, DeploymentMode,
                                  HTTPOptions, ProxyLocation, RequestRouterConfig, gRPCOptions)
from tessera.serve.context import ReplicaContext, get_replica_context
from tessera.serve.deployment import Application, Deployment, deployment
from tessera.serve.exceptions import (BackPressureError, DeploymentUnavailableError,
                                      RayServeException, RequestCancelledError)
from tessera.serve.handle import (DeploymentHandle, DeploymentResponse,
                                  DeploymentResponseGenerator)
from tessera.serve.ingress import ingress
from tessera.serve.multiplex import get_multiplexed_model_id, multiplexed
from tessera.serve.schema import LoggingConfig

__all__ = [
    "Application", "AutoscalingConfig", "AutoscalingPolicy", "BackPressureError", "Deployment",
    "DeploymentHandle", "DeploymentMode", "DeploymentResponse", "DeploymentResponseGenerator",
    "DeploymentUnavailableError", "HTTPOptions", "LoggingConfig", "ProxyLocation",
    "RayServeException", "ReplicaContext", "RequestCancelledError", "RequestRouterConfig",
    "batch", "delete", "deployment", "gRPCOptions", "get_app_handle", "get_deployment_handle",
    "get_multiplexed_model_id", "get_replica_context", "ingress", "multiplexed", "run",
    "shutdown", "start", "status",
]
