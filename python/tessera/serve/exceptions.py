"""Serve's exception classes, named and worded as Ray Serve's (`ray.serve.exceptions`).

  RayServeException           the root of Serve's own errors
  BackPressureError           a caller's queue is at `max_queued_requests` (HTTP: 503)
  RequestCancelledError       the request was cancelled (client gone, timeout, `cancel()`); it is
                              also a tessera TaskCancelledError, as Ray's is a TaskCancelledError
  DeploymentUnavailableError  the deployment failed to deploy

Each pickles with its fields, so it reaches the caller from a replica intact.

Threading: plain values. Cost: nothing.
"""

from __future__ import annotations

from typing import Any, Optional

from tessera.exceptions import TaskCancelledError


class RayServeException(Exception):
    """An error of Serve itself (not of the user's code)."""


class BackPressureError(RayServeException):
    """Raised when `max_queued_requests` is exceeded at a caller (a handle or a proxy)."""

    def __init__(self, num_queued_requests: int, max_queued_requests: int) -> None:
        super().__init__(num_queued_requests, max_queued_requests)
        self._message = (
            f"Request dropped due to backpressure (num_queued_requests={num_queued_requests}, "
            f"max_queued_requests={max_queued_requests})."
        )

    def __str__(self) -> str:
        return self._message

    @property
    def message(self) -> str:
        return self._message


class RequestCancelledError(RayServeException, TaskCancelledError):
    """Raised when a Serve request is cancelled."""

    def __init__(self, request_id: Optional[str] = None) -> None:
        Exception.__init__(self, request_id)
        self._request_id = request_id
        # TaskCancelledError's fields, so code written for either class reads them.
        self.task_id = None
        self.error_message = None

    def __reduce__(self) -> tuple:
        return (RequestCancelledError, (self._request_id,))

    def __str__(self) -> str:
        if self._request_id:
            return f"Request {self._request_id} was cancelled."
        return "Request was cancelled."


class DeploymentUnavailableError(RayServeException):
    """Raised when a deployment cannot take requests: it failed to deploy. `deployment_id` is
    shown with str() (a DeploymentID reads "Deployment(name='D', app='A')")."""

    def __init__(self, deployment_id: Any) -> None:
        super().__init__(deployment_id)
        self._deployment_id = deployment_id

    @property
    def message(self) -> str:
        return f"{self._deployment_id} is unavailable because it failed to deploy."

    def __str__(self) -> str:
        return self.message


__all__ = [
    "BackPressureError", "DeploymentUnavailableError", "RayServeException",
    "RequestCancelledError",
]
