"""The failures of one check_openapi.py run, shared by its modules (openapi_elections.py)."""

failures = []


def fail(message):
    failures.append(message)
    print(f"FAIL {message}", flush=True)


def expect(answer, **wanted):
    """The answer's fields (error: its error's code and field) have the wanted values."""
    fields = answer.get("error", answer) if isinstance(answer, dict) else {}
    for name, value in wanted.items():
        if fields.get(name) != value:
            fail(f"{name} is {fields.get(name)!r}, not {value!r}: {answer}")
