"""An uploaded rubric's key (docs/rubric-format.md, "Keys and owners"): lower-case ASCII
letters, digits and hyphens after NFKC, and never a look-alike of a built-in key or of
another account's key. Before, `LitSumm` and `litsuмm` (a Cyrillic м) were stored beside
the built-in `litsumm`."""

import html
from pathlib import Path

import pytest
import yaml
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotate.models import Rubric
from annotate.rubric_keys import key_problem, skeleton
from tests.factories import UserFactory

LITSUMM = Path(django_settings.BASE_DIR) / "fixtures" / "rubrics" / "litsumm.yaml"


def creator(username):
    user = UserFactory(username=username)
    user.user_permissions.add(Permission.objects.get(codename="add_study", content_type__app_label="annotate"))
    return user


def rubric_yaml(key: str, title="Lab clarity") -> str:
    definition = yaml.safe_load(LITSUMM.read_text())
    definition.update(key=key, title=title)
    return yaml.safe_dump(definition, allow_unicode=True)


def post(user, key: str, title="Lab clarity"):
    client = Client()
    client.force_login(user)
    data = rubric_yaml(key, title).encode()
    return client.post("/studies/rubrics/", {"file": SimpleUploadedFile("r.yaml", data)})


@pytest.mark.django_db
@pytest.mark.parametrize(
    "key,fragment",
    [
        ("LitSumm", "looks like the built-in rubric 'litsumm'"),
        ("FACTPICO", "looks like the built-in rubric 'factpico'"),
        ("litsu\u043cm", "U+043C"),  # Cyrillic small em
        ("l\u0456tsumm", "U+0456"),  # Cyrillic small Byelorussian-Ukrainian i
        ("\u03bfther", "U+03BF"),  # Greek small omicron
        ("\uff4c\uff49\uff54\uff53\uff55\uff4d\uff4d", "looks like the built-in rubric 'litsumm'"),  # fullwidth
        ("lit-summ", "looks like the built-in rubric 'litsumm'"),
        ("l1tsumm", "looks like the built-in rubric 'litsumm'"),
        ("c1aims", "looks like the built-in rubric 'claims'"),
        ("clinf0", "looks like the built-in rubric 'clinfo'"),
        ("MyRubric", "write it as 'myrubric'"),
        ("my_rubric", "letters, digits and hyphens"),
        ("-rubric", "letters, digits and hyphens"),
        ("my rubric", "letters, digits and hyphens"),
        ("r" * 65, "at most 64"),
    ],
)
def test_a_key_that_is_not_a_plain_new_key_is_refused(key, fragment):
    response = post(creator("pi"), key)
    page = html.unescape(response.content.decode())
    assert response.status_code == 400, page[-1500:]
    assert fragment in page, page[-1500:]
    assert not Rubric.objects.exists()


@pytest.mark.django_db
def test_a_plain_key_is_stored_as_written():
    assert post(creator("pi"), "lab-clarity-2").status_code == 302
    assert Rubric.objects.get().key == "lab-clarity-2"


@pytest.mark.django_db
def test_a_look_alike_of_another_accounts_key_is_refused_but_not_of_ones_own():
    alice, bob = creator("alice"), creator("bob")
    assert post(alice, "labclarity").status_code == 302
    response = post(bob, "lab-clarity")
    assert response.status_code == 400
    assert "looks like the rubric 'labclarity'" in html.unescape(response.content.decode())
    assert post(alice, "lab-clarity").status_code == 302
    assert sorted(Rubric.objects.values_list("key", flat=True)) == ["lab-clarity", "labclarity"]


@pytest.mark.django_db
def test_a_look_alike_of_a_stored_key_without_an_owner_is_refused(admin_user):
    # Stored before keys were checked (or by manage.py load_rubric): nobody owns it.
    Rubric.objects.create(key="teamrubric", version=1, title="T", definition={}, content_hash="x")
    response = post(creator("pi"), "team-rubric")
    assert response.status_code == 400
    assert "looks like the rubric 'teamrubric'" in html.unescape(response.content.decode())
    # A superuser is no exception: a look-alike misleads whoever picks a rubric by name.
    assert post(admin_user, "team-rubric").status_code == 400


def test_skeletons_fold_case_width_accents_and_common_look_alikes():
    assert skeleton("LitSumm") == skeleton("litsumm")
    assert skeleton("litsu\u043cm") == skeleton("litsumm")  # Cyrillic м
    assert skeleton("\u0441laims") == skeleton("claims")  # Cyrillic с
    assert skeleton("f\u03b1ctpico") == skeleton("factpico")  # Greek α
    assert skeleton("l\u00edtsumm") == skeleton("litsumm")  # í
    assert skeleton("lit_summ") == skeleton("lit summ") == skeleton("lit-summ") == skeleton("litsumm")
    assert skeleton("l1tsumm") == skeleton("litsumm") == skeleton("Iitsumm")
    assert skeleton("clinf0") == skeleton("clinfo")
    assert skeleton("litsurnm") == skeleton("litsumm")
    assert skeleton("labclarity") != skeleton("labquality")


def test_key_problem_accepts_plain_keys_and_names_the_rest():
    assert key_problem("lab-clarity-2") is None
    assert key_problem("2024-study") is None
    assert "U+043C" in key_problem("litsu\u043cm")
    assert "write it as 'litsumm'" in key_problem("LitSumm")
    assert key_problem("lab--clarity") is None
    assert "letters, digits and hyphens" in key_problem("lab.clarity")
