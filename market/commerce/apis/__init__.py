"""The commerce API, one module per noun: ``listings`` (the catalog, a listing's card and plots, publish and
retire), ``purchases``, ``plans`` (pricing plans and metered use), ``wallets`` (balances, ledgers, top-ups),
``earnings`` (a silo's revenue shares and its payouts), ``downloads``, ``predictions`` and ``money`` (the
operator's money page as an API); ``pagination`` is their shared page envelope. ``urls`` routes them."""
