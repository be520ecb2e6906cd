class InterbotixException(Exception):
    """Exception to be raised when the Interbotix API is misused."""
