"""opsdk.cli"""
