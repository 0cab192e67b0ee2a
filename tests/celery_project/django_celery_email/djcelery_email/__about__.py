__all__ = [
    '__title__', '__summary__', '__uri__', '__version__', '__author__',
    '__email__', '__license__', '__copyright__',
]

__title__ = 'django-celery-email'
__summary__ = 'An async Django email backend using celery'
__uri__ = 'https://github.com/pmclanahan/django-celery-email'

__version__ = '3.0.0'

__author__ = 'Paul McLanahan'
__email__ = 'paul@mclanahan.net'

__license__ = 'BSD'
__copyright__ = 'Copyright 2015 {0}'.format(__author__)
