"""The page envelope of the commerce API's lists (catalog, purchases, wallet ledgers, money)."""

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response


class CatalogPagination(LimitOffsetPagination):
    default_limit = 20
    max_limit = 100

    def page_response(
        self, request, *, count: int, limit: int, offset: int, results: list
    ) -> Response:
        """The same envelope as ``paginate_queryset`` + ``get_paginated_response``, for a page read elsewhere."""
        self.request, self.count, self.limit, self.offset = request, count, limit, offset
        return self.get_paginated_response(results)
