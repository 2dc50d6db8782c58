def participant(request):
    """`is_participant`: the page is shown to a study-only participant (base.html hides the
    navigation to pages they cannot reach)."""
    session = getattr(request, "session", None)
    return {"is_participant": session is not None and session.get("recruit_participant") is not None}
