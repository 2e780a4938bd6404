"""Text helpers the command-line tests share."""


def one_line(text: str) -> str:
    """``text`` with every run of white space (a rich console's line folds included) made one space, so a
    message is matched whatever width the terminal folded it to.

    >>> one_line("error: --gpus 12\\n  has no plan ")
    'error: --gpus 12 has no plan'
    """
    return " ".join(text.split())
