"""Writes of the recruit app, one module per topic (docs/recruitment.md):

- `onboarding`: the study admin's set-up and each rater's way through consent,
  instructions and the questionnaire;
- `links`: crowd recruitment links, their tokens and terms;
- `participation`: participants arriving (with their work assigned) and leaving;
- `checks`: what they share (a refused field's error, the panel id's shape).

Every function is keyword-only and atomic where it writes, as annotate's services. Callers
import from the topic module; nothing is re-exported here.
"""
