from django.apps import AppConfig


class InvitationsConfig(AppConfig):
    name = "market.invitations"
    label = "invitations"
