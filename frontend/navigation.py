"""Who sees which menu: the roles of a user and the navigation items of each role.

A user's roles come from the account (staff are operators) and its organisation's flags (silo, buyer); an
organisation that is both gets both menus, merged in order without repeats.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class NavigationItem:
    label: str
    url_name: str
    section: str


OPERATOR_ITEMS = (
    NavigationItem("Overview", "home", "home"),
    NavigationItem("Federations", "federation-list", "federations"),
    NavigationItem("Jobs", "job-list", "jobs"),
    NavigationItem("Budgets", "budget-index", "budgets"),
    NavigationItem("Market", "commerce-catalog", "market"),
    NavigationItem("Wallets", "wallet-operations", "wallets"),
    NavigationItem("Money", "money", "money"),
    NavigationItem("People", "invitation-list", "people"),
    NavigationItem("Audit log", "audit-log", "audit"),
)
SILO_ITEMS = (
    NavigationItem("Home", "home", "home"),
    NavigationItem("Federations", "federation-list", "federations"),
    NavigationItem("Submissions", "submission-list", "submissions"),
    NavigationItem("Budget", "budget-index", "budgets"),
    NavigationItem("Earnings", "commerce-earnings", "earnings"),
)
BUYER_ITEMS = (
    NavigationItem("Home", "home", "home"),
    NavigationItem("Models", "commerce-catalog", "market"),
    NavigationItem("Purchases", "commerce-purchases", "purchases"),
    NavigationItem("Wallet", "commerce-wallet", "wallet"),
)
ITEMS_OF_ROLE = {"operator": OPERATOR_ITEMS, "silo": SILO_ITEMS, "buyer": BUYER_ITEMS}


def roles_of(user) -> list[str]:
    """``operator``, ``silo`` and/or ``buyer``, in that order."""
    if not user.is_authenticated:
        return []
    organisation = user.organisation
    roles = ["operator"] if user.is_operator else []
    if organisation is not None and organisation.is_silo:
        roles.append("silo")
    if organisation is not None and organisation.is_buyer:
        roles.append("buyer")
    return roles


def navigation_items(user) -> list[NavigationItem]:
    """The menu of every role the user has, first occurrence of each section kept (Home / Overview once)."""
    items, sections = [], set()
    for role in roles_of(user):
        for item in ITEMS_OF_ROLE[role]:
            if item.section not in sections:
                sections.add(item.section)
                items.append(item)
    return items
