from django.core.management.base import BaseCommand

from market.audit.selectors import audit_json_lines
from market.audit.services import audit_record


class Command(BaseCommand):
    help = "Write the audit log as JSON lines (one entry per line, in chain order) to a file or standard output."

    def add_arguments(self, parser):
        parser.add_argument(
            "--output",
            "-o",
            default="-",
            help="File to write; '-' (the default) is standard output.",
        )

    def handle(self, *args, output="-", **options):
        written = 0
        if output == "-":
            for line in audit_json_lines():
                self.stdout.write(line, ending="")
                written += 1
        else:
            with open(output, "w", encoding="utf-8") as stream:
                for line in audit_json_lines():
                    stream.write(line)
                    written += 1
            self.stdout.write(f"Wrote {written} audit entries to {output}.")
        audit_record(action="audit.exported", details={"entries": written, "via": "command"})
