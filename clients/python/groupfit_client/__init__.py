"""Client of the groupfit assignment service."""

from groupfit_client.http import AsyncGroupfitClient, GroupfitClient, GroupfitError

__all__ = ["AsyncGroupfitClient", "GroupfitClient", "GroupfitError"]
